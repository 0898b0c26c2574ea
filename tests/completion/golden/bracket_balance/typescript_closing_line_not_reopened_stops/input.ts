function save(ok: boolean): void {
  if (ok) {
    notify();
  <CURSOR>
  }
}
