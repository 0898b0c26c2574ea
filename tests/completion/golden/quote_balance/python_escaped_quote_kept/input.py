s = "<CURSOR>"
