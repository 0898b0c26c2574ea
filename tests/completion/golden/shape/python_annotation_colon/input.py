def f(x:<CURSOR>
