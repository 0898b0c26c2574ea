function clamp(a, lo, hi) {<CURSOR>
  return a;
}
