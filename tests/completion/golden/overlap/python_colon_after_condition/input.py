if <CURSOR>:
    pass
