import { readFileSync } from "fs";

export function loadConfig(path: string): Record<string, string> {
	const text = readFileSync(path, "utf-8");
	const config: Record<string, string> = {};
	for (const line of text.split("\n")) {
		const [key, value] = line.split("=");
		<CURSOR>
	}
	return config;
}
