def f(xs):
    n = len(xs)<CURSOR>
