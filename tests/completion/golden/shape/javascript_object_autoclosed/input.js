const o = {<CURSOR>};
