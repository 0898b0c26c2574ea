function save(ok: boolean): void {
	if (ok) {
	<CURSOR>
	}
}
