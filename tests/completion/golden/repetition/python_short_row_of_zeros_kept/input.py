grid = [<CURSOR>]
