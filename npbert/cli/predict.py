"""placeholder"""
def add_parser(commands):
    p = commands.add_parser("predict", help="(being written)")
    p.set_defaults(run=lambda a: 0)
