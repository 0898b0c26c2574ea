def sign(x):
    if x > 0:
        s = 1
<CURSOR>
    return s
