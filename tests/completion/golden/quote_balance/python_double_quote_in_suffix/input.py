print("<CURSOR>")
