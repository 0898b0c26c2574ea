"""Tree-sitter queries, one ``<language>.scm`` per grammar; read with importlib.resources."""
