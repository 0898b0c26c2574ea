let n = <CURSOR>;
