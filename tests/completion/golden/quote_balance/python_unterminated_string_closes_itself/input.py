name = "<CURSOR>
