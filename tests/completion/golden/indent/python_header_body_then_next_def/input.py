def area(r):<CURSOR>
