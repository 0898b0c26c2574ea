const s = `total: ${<CURSOR>`;
