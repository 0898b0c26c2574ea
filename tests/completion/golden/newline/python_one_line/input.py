def f(xs):
    n = <CURSOR>
