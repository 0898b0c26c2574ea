; C: function definitions (plain, and returning pointers); everything C shares with C++ is in
; cfamily.scm, appended to this file.

(function_definition
  declarator: (function_declarator declarator: (identifier) @name)
  body: (compound_statement) @body) @def.function

(function_definition
  declarator: (pointer_declarator
    declarator: (function_declarator declarator: (identifier) @name))
  body: (compound_statement) @body) @def.function

(function_definition
  declarator: (pointer_declarator
    declarator: (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name)))
  body: (compound_statement) @body) @def.function
