const v = <CURSOR>
