"""Names of transformers / torch that npbert does not carry out, refused by name.

A tutorial that calls one of them gets one line saying what it called and what to write
instead, not an AttributeError from deep inside or, worse, a keyword taken and ignored.

    refuse_keywords(where, kwargs, REFUSED)   a TypeError for the first refused keyword given
                                              a value other than None or False (the defaults)
    refused_method(name, instead)             a method that raises NotImplementedError
    install(cls, {name: instead})             refused_method for each name, on cls

docs/compatibility.md lists every one (tests/conformance/ checks they raise).
"""


def message(where, name, instead):
    return f"{where}: `{name}` is not supported in npbert: {instead}"


def refuse_keywords(where, kwargs, refused):
    """TypeError naming the first keyword of `kwargs` in `refused` ({name: what to do instead})
    whose value is not None or False (what asks for nothing)."""
    for name, value in kwargs.items():
        if name in refused and value is not None and value is not False:
            raise TypeError(message(where, name, refused[name]))


def refused_method(name, instead, kind="method"):
    def refused(self, *args, **kwargs):
        raise NotImplementedError(message(f"{type(self).__name__}.{name}()", name, instead))
    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"Not supported in npbert: {instead}"
    refused.npbert_refused = instead
    return refused


def install(cls, refused):
    """Give `cls` a refused method for each {name: instead} it does not define itself."""
    for name, instead in refused.items():
        if name not in vars(cls):
            setattr(cls, name, refused_method(name, instead))
    return cls


def overridden(obj, base, refused):
    """The names of `refused` a subclass of `base` defines: hooks npbert would never call."""
    return [n for n in refused if n in dir(type(obj)) and getattr(type(obj), n) is not getattr(base, n, None)]
