def f():<CURSOR>
