export function greet(name: string): string {
	const msg = `Hello, ${name}`;
	if (msg.length > 10) {<CURSOR>
	return msg;
}
