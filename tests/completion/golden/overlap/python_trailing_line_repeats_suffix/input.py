def total(xs):<CURSOR>
    return s
