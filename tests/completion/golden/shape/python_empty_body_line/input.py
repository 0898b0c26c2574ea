def area(r):
    <CURSOR>


def main():
    pass
