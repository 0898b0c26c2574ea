const f = (a: number) => {
  <CURSOR>
};
