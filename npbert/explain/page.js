// The script of the `npbert explain --html` page (plain JavaScript, no library; npbert/explain/page.py
// inlines it): it reads the data block, draws every stage as a heatmap on a canvas, and wires the
// layer / head / token selectors.  When it has drawn everything it writes #npbert-status (what the
// browser tests read).
"use strict";
const errors = [];
window.addEventListener("error", e => { errors.push(String(e.message || e)); setStatus(); });
const consoleError = console.error.bind(console);
console.error = (...a) => { errors.push(a.join(" ")); consoleError(...a); };
const $ = (sel, el) => (el || document).querySelector(sel);
const make = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; return e; };
const DATA = JSON.parse(document.getElementById("npbert-data").textContent);
const C = DATA.model.config, T = DATA.tokens.length;
const SIZES = {B: 1, T: T, F: T, H: C.H, N: C.N, D: C.D, I: C.I};
const state = {layer: 0, head: 0, token: 0, drawn: 0, blank: 0};

function decode(t) {                        // base64 float32 little-endian -> Float32Array
  if (t._a) return t._a;
  const s = atob(t.b64), bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  t._a = new Float32Array(bytes.buffer);
  return t._a;
}
function fmt(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  return (a >= 1e4 || a < 1e-3) ? v.toExponential(2) : v.toPrecision(4);
}
// Colours: diverging blue - white - red around 0, or white - blue for probabilities.
const NEG = [33, 102, 172], POS = [178, 24, 43], SEQ = [8, 48, 107];
function colour(t, seq) {                   // t in [-1, 1] (diverging) or [0, 1] (sequential)
  const c = seq ? SEQ : (t < 0 ? NEG : POS), a = Math.min(1, Math.abs(t));
  return [255 + (c[0] - 255) * a, 255 + (c[1] - 255) * a, 255 + (c[2] - 255) * a];
}
const css = rgb => `rgb(${rgb[0] | 0},${rgb[1] | 0},${rgb[2] | 0})`;

// A stage's tensor for the current head as rows x cols (B = 1 dropped).
function slice(stage, which) {
  const a = decode(stage[which]), dims = stage.dims.slice(1), shape = stage.shape.slice(1);
  let off = 0, headed = false;
  if (dims[0] === "N") { const per = shape[1] * shape[2]; off = state.head * per; dims.shift(); shape.shift(); headed = true; }
  const rows = dims.length === 2 ? shape[0] : 1, cols = shape[shape.length - 1];
  return {data: a.subarray(off, off + rows * cols), rows, cols, rowDim: dims.length === 2 ? dims[0] : "B",
          colDim: dims[dims.length - 1], headed, rowName: stage.section === "head" ? "example 0" : "[CLS] 0"};
}
function stats(a) {
  let s = 0, s2 = 0, lo = Infinity, hi = -Infinity;
  for (const v of a) { s += v; s2 += v * v; if (v < lo) lo = v; if (v > hi) hi = v; }
  const m = s / a.length;
  return {mean: m, std: Math.sqrt(Math.max(0, s2 / a.length - m * m)), min: lo, max: hi};
}
function percentile99(a) {
  const s = Float32Array.from(a, Math.abs).sort(), v = s[Math.min(s.length - 1, Math.floor(0.99 * s.length))];
  return Math.max(v, 1e-30);
}
const tokenLabel = t => `${t} ${DATA.tokens[t]}`;

// One heatmap: canvas with token labels, a colour bar, numbers and a hover read-out.
function heatmap(panel, sl, seq, onRowClick) {
  panel.textContent = "";
  const canvas = make("canvas", "map"), ctx = canvas.getContext("2d");
  ctx.font = "11px system-ui, sans-serif";
  const labelled = sl.rowDim === "T" || sl.rowDim === "F", colTokens = sl.colDim === "T";
  const rowLabels = [];
  for (let r = 0; r < sl.rows; r++) rowLabels.push(labelled ? tokenLabel(r) : sl.rowName);
  const lw = Math.ceil(Math.max(...rowLabels.map(s => ctx.measureText(s).width))) + 8;
  const colLabels = colTokens ? DATA.tokens.map((t, i) => tokenLabel(i)) : [];
  const lh = colTokens ? Math.ceil(Math.max(...colLabels.map(s => ctx.measureText(s).width))) + 8 : 0;
  const avail = Math.max(120, (panel.clientWidth || 520) - lw - 4);
  const cw = Math.min(colTokens ? 22 : 16, avail / sl.cols);
  const ch = colTokens ? Math.max(cw, 13) : (sl.rows === 1 ? 22 : Math.max(13, Math.min(16, cw)));
  canvas.width = Math.ceil(lw + cw * sl.cols); canvas.height = Math.ceil(lh + ch * sl.rows);
  ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#333"; ctx.textBaseline = "middle";
  rowLabels.forEach((s, r) => { ctx.textAlign = "right"; ctx.fillText(s, lw - 5, lh + ch * (r + 0.5)); });
  colLabels.forEach((s, c) => { ctx.save(); ctx.translate(lw + cw * (c + 0.5), lh - 5); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left"; ctx.fillText(s, 0, 0); ctx.restore(); });
  // Colours: probabilities 0 to 1; other tensors +-the 99th percentile of |value| (BERT has a few
  // outlier dimensions that would leave the rest white), the values beyond it saturated.
  const st = stats(sl.data), range = seq ? 1 : percentile99(sl.data);
  const clipped = !seq && range < Math.max(-st.min, st.max);
  for (let r = 0; r < sl.rows; r++) for (let c = 0; c < sl.cols; c++) {
    const x = Math.floor(lw + c * cw), x1 = Math.floor(lw + (c + 1) * cw);
    ctx.fillStyle = css(colour(sl.data[r * sl.cols + c] / range, seq));
    ctx.fillRect(x, Math.floor(lh + r * ch), Math.max(1, x1 - x), Math.ceil(ch));
  }
  panel.appendChild(canvas);
  const bar = make("div", "bar"), bc = make("canvas"), bctx = bc.getContext("2d");
  bc.width = 160; bc.height = 10;
  for (let i = 0; i < 160; i++) { bctx.fillStyle = css(colour(seq ? i / 159 : i / 79.5 - 1, seq)); bctx.fillRect(i, 0, 1, 10); }
  bar.append(make("span", "", (clipped ? "\u2264 " : "") + fmt(seq ? 0 : -range)), bc,
             make("span", "", (clipped ? "\u2265 " : "") + fmt(range)));
  if (clipped) bar.appendChild(make("span", "clip", "(99th percentile of |value|)"));
  panel.appendChild(bar);
  panel.appendChild(make("div", "nums", `mean ${fmt(st.mean)}   std ${fmt(st.std)}   min ${fmt(st.min)}   max ${fmt(st.max)}`));
  const hover = make("div", "hover", "\u00a0"); panel.appendChild(hover);
  const cell = e => { const b = canvas.getBoundingClientRect(), sx = canvas.width / b.width;
    const c = Math.floor(((e.clientX - b.left) * sx - lw) / cw), r = Math.floor(((e.clientY - b.top) * sx - lh) / ch);
    return (r >= 0 && r < sl.rows && c >= 0 && c < sl.cols) ? [r, c] : null; };
  canvas.addEventListener("mousemove", e => { const rc = cell(e); if (!rc) return;
    const [r, c] = rc; hover.textContent = `${sl.rowDim}=${labelled ? tokenLabel(r) : 0}, ` +
      `${sl.colDim}=${colTokens ? tokenLabel(c) : c}: ${fmt(sl.data[r * sl.cols + c])}`; });
  if (onRowClick) { canvas.style.cursor = "pointer";
    canvas.addEventListener("click", e => { const rc = cell(e); if (rc) onRowClick(rc[0]); }); }
  const px = ctx.getImageData(lw, lh, Math.max(1, canvas.width - lw), Math.max(1, canvas.height - lh)).data;
  let sig = 0, differs = false;
  for (let i = 0; i < px.length; i += 4) { sig = (sig * 31 + px[i] + 7 * px[i + 1] + 13 * px[i + 2]) % 1000000007;
    if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) differs = true; }
  canvas.dataset.signature = String(sig);
  state.drawn++; if (!differs && st.min !== st.max) state.blank++;   // values that differ, drawn as one colour
  return canvas;
}

function checkLine(ch, what) {
  if (!ch) return null;
  const e = make("div", "check " + (ch.ok ? "ok" : "bad"));
  e.textContent = `${ch.ok ? "\u2713" : "\u2717"} ${what} ${ch.what}: max|diff| ${ch.max_abs_diff.toExponential(1)} ` +
    `(${ch.rule}, tol ${ch.tol.toExponential(0)})`;
  return e;
}
function shapeBoxes(stage) {
  const e = make("span", "shape");
  stage.dims.forEach((d, i) => { const b = make("span", "dim"); b.title = DATA.dims[d];
    b.append(make("b", "", d), `=${stage.shape[i]}`); e.appendChild(b); });
  return e;
}

// A stage card: header, formula, shape, links; forward and gradient side by side; checks.
function card(stage, n) {
  const el = make("div", "stage"); el.id = `stage-${stage.section}-${stage.key}`;
  const head = make("div", "head");
  head.append(make("span", "num", String(n)), make("h3", "", stage.label), make("code", "module", stage.module));
  const meta = make("div", "meta");
  const src = make("a", "src", `${stage.source.file}:${stage.source.line}`); src.href = stage.source.href;
  src.title = `${stage.source.function}(), the line that computes this stage`;
  const doc = make("a", "doc", stage.doc.page); doc.href = stage.doc.href;
  meta.append(make("code", "formula", stage.formula), shapeBoxes(stage), src, doc);
  const pair = make("div", "pair"), fw = make("div", "panel"), gr = make("div", "panel");
  pair.append(fw, gr);
  el.append(head, meta, pair);
  el._panels = [fw, gr]; el._stage = stage;
  return el;
}
function drawCard(el, stage) {
  el._stage = stage;
  $(".module", el).textContent = stage.module; $("h3", el).textContent = stage.label;
  const [fw, gr] = el._panels, seq = stage.key === "probs";
  const onRow = stage.key === "probs" ? r => selectToken(r) : null;
  const headNote = stage.dims.includes("N") ? ` \u2014 head ${state.head}` : "";
  const fs = slice(stage, "value"), gs = slice(stage, "grad");
  heatmap(fw, fs, seq, onRow); heatmap(gr, gs, false, onRow);
  fw.prepend(make("div", "ptitle", "forward" + headNote));
  gr.prepend(make("div", "ptitle grad", `gradient d loss / d ${stage.key}` + headNote));
  el.querySelectorAll(".check").forEach(x => x.remove());
  const f = checkLine(stage.check.forward, "forward"), b = checkLine(stage.check.backward, "gradient");
  const at = $(".attention", el), put = x => el.insertBefore(x, at);
  if (f) put(f); if (b) put(b);
  if (!f && !b) put(make("div", "check none", "not an output of the model: checked through the stages after it"));
}

// Attention: every head of the layer as a thumbnail, and the row of the chosen query token.
function drawAttention(box) {
  box.textContent = "";
  const probs = DATA.stages.find(s => s.section === "layer" && s.layer === state.layer && s.key === "probs");
  const a = decode(probs.value), per = T * T;
  box.appendChild(make("div", "ptitle", `all ${C.N} heads of layer ${state.layer} (click one to choose it)`));
  const grid = make("div", "thumbs");
  for (let h = 0; h < C.N; h++) {
    const cv = make("canvas", "thumb" + (h === state.head ? " on" : "")), s = Math.max(2, Math.floor(72 / T));
    cv.width = cv.height = s * T; cv.title = `head ${h}`; const ctx = cv.getContext("2d");
    for (let f = 0; f < T; f++) for (let t = 0; t < T; t++) {
      ctx.fillStyle = css(colour(a[h * per + f * T + t], true)); ctx.fillRect(t * s, f * s, s, s); }
    cv.addEventListener("click", () => { $("#head").value = String(h); $("#head").dispatchEvent(new Event("change")); });
    const w = make("div", "thumbwrap"); w.append(cv, make("div", "", `head ${h}`)); grid.appendChild(w);
  }
  box.appendChild(grid);
  const q = state.token, row = a.subarray(state.head * per + q * T, state.head * per + (q + 1) * T);
  box.appendChild(make("div", "ptitle", `token ${tokenLabel(q)} attends to (layer ${state.layer}, head ${state.head}; ` +
    "click a row of the map above or a token at the top):"));
  const bars = make("div", "bars"); bars.id = "attention-row";
  row.forEach((p, t) => { const r = make("div", "barrow" + (t === q ? " self" : ""));
    const fill = make("span", "fill"); fill.style.width = `${(100 * p).toFixed(1)}%`;
    const track = make("span", "track"); track.appendChild(fill);
    r.append(make("span", "tok", tokenLabel(t)), track, make("span", "val", p.toFixed(3))); bars.appendChild(r); });
  box.appendChild(bars);
}

function selectToken(t) {
  state.token = t; $("#token").value = String(t);
  document.querySelectorAll(".tokcol").forEach(e => e.classList.toggle("on", Number(e.dataset.t) === t));
  drawAttention($("#attention"));
}
function drawLayer() {
  const stages = DATA.stages.filter(s => s.section === "layer" && s.layer === state.layer);
  document.querySelectorAll("#layer-cards .stage").forEach((el, i) => drawCard(el, stages[i]));
  $("#layer-title").textContent = `encoder.layer.${state.layer}  (BertLayer ${state.layer + 1} of ${C.L})`;
  drawAttention($("#attention"));
}

function setStatus(extra) {
  const el = $("#npbert-status");
  el.dataset.state = errors.length ? "error" : (extra || el.dataset.state);
  el.dataset.drawn = state.drawn; el.dataset.blank = state.blank; el.dataset.errors = errors.length;
  el.textContent = errors.length ? `errors: ${errors.join("; ")}` :
    `rendered ${DATA.stages.length} stages (${state.drawn} heatmaps drawn, ${state.blank} blank)`;
}
const attentionSignature = () => $("#stage-layer-probs canvas.map").dataset.signature;
function selfTest() {                        // #selftest: change the layer and the head as a reader would
  const before = attentionSignature(), sel = $("#layer"), hsel = $("#head");
  sel.value = String((state.layer + 1) % C.L); sel.dispatchEvent(new Event("change"));
  const afterLayer = attentionSignature();
  hsel.value = String((state.head + 1) % C.N); hsel.dispatchEvent(new Event("change"));
  const afterHead = attentionSignature();
  const row0 = $("#attention-row").textContent; selectToken((state.token + 1) % T);
  const el = $("#npbert-status");
  el.dataset.layerChanges = String(C.L > 1 && afterLayer !== before);
  el.dataset.headChanges = String(C.N > 1 && afterHead !== afterLayer);
  el.dataset.tokenChanges = String($("#attention-row").textContent !== row0);
}

function main() {
  const hash = new URLSearchParams(location.hash.slice(1));
  state.layer = Math.min(C.L - 1, Number(hash.get("layer") || 0));
  state.head = Math.min(C.N - 1, Number(hash.get("head") || 0));
  state.token = Math.min(T - 1, Number(hash.get("token") || 0));
  const opts = (sel, n, name) => { for (let i = 0; i < n; i++) { const o = make("option", "", name(i)); o.value = String(i); sel.appendChild(o); } };
  opts($("#layer"), C.L, i => `layer ${i}`); opts($("#head"), C.N, i => `head ${i}`); opts($("#token"), T, tokenLabel);
  $("#layer").value = String(state.layer); $("#head").value = String(state.head); $("#token").value = String(state.token);
  $("#layer").addEventListener("change", e => { state.layer = Number(e.target.value); drawLayer(); });
  $("#head").addEventListener("change", e => { state.head = Number(e.target.value); drawLayer(); });
  $("#token").addEventListener("change", e => selectToken(Number(e.target.value)));
  document.querySelectorAll(".tokcol").forEach(e => e.addEventListener("click", () => selectToken(Number(e.dataset.t))));
  let n = 0;
  for (const section of ["embeddings", "layer", "pooler", "head"]) {
    const box = $(`#${section}-cards`);
    if (!box) continue;                      // no head
    const stages = DATA.stages.filter(s => s.section === section && (s.layer === null || s.layer === 0));
    for (const s of stages) { const el = card(s, ++n); box.appendChild(el);
      if (section !== "layer") drawCard(el, s);
      if (s.key === "probs") { const att = make("div", "attention"); att.id = "attention"; el.appendChild(att); } }
  }
  drawLayer(); selectToken(state.token);
  document.querySelectorAll(".loss-map").forEach(el => {   // the loss's upstream gradients (loss.U, loss.upstream.*)
    const t = el.dataset.tensor.split(".").reduce((o, k) => o[k], DATA.loss);
    const dims = t.shape.length === 2 ? ["B", "H"] : ["B", "T", "H"];
    heatmap(el, slice({value: t, dims, shape: t.shape}, "value"), false, null);
  });
  if (hash.get("selftest")) selfTest();
  let resize = null;                         // the maps fit their panels: redraw when the window changes
  window.addEventListener("resize", () => { clearTimeout(resize); resize = setTimeout(() => {
    document.querySelectorAll("#embeddings-cards .stage, #pooler-cards .stage, #head-cards .stage").forEach(el => drawCard(el, el._stage));
    drawLayer(); }, 200); });
  setStatus("ok");
}
try { main(); } catch (e) { errors.push(`${e.name}: ${e.message}`); setStatus(); throw e; }
