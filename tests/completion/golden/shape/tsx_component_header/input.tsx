export function App() {<CURSOR>
