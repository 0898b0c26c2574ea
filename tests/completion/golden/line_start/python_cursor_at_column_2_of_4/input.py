def parse(rows):
    out = []
  <CURSOR>  
    return out
