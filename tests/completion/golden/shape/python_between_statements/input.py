def area(r):
    pi = 3.14159
    <CURSOR>
    return pi * r * r
