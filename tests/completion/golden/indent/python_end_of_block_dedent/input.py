def f():
    x = 1
    <CURSOR>

print(f())
