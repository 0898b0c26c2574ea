def scale(xs, k):
    out = []
    for x in xs:
        y = x * k
<CURSOR>
        out.append(y)
    return out
