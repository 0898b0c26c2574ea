function describe(id: string, tags: string[]) {
	logger.info(`user ${id}`, format(tags, <CURSOR>
}
