const a = <div>{<CURSOR>}</div>;
