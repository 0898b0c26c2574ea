function f(x: number) {
  if (x > 0) {
    <CURSOR>
  }
  return x;
}
