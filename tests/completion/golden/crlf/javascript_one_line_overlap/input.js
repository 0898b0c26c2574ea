let n = <CURSOR>;
console.log(n);
