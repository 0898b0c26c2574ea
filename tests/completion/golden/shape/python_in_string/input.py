print("hello, <CURSOR>")
