def run():<CURSOR>
