# größe → taille
def größe(wert: str) -> int:<CURSOR>
