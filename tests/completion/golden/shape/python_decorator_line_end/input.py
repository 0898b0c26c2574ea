@app.route('/')<CURSOR>
