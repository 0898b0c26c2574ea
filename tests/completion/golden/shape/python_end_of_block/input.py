def area(r):
    pi = 3.14159
    <CURSOR>


print(area(2))
