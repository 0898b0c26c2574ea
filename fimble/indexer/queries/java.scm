; Java: types, methods and constructors, static final fields, imports.

(class_declaration
  name: (identifier) @name
  body: (class_body) @body) @def.class

(record_declaration
  name: (identifier) @name
  body: (class_body) @body) @def.class

(interface_declaration
  name: (identifier) @name
  body: (interface_body) @body) @def.interface

(annotation_type_declaration
  name: (identifier) @name
  body: (_) @body) @def.interface

(enum_declaration
  name: (identifier) @name
  body: (enum_body) @body) @def.enum

(method_declaration
  name: (identifier) @name
  body: (block)? @body) @def.method

(constructor_declaration
  name: (identifier) @name
  body: (constructor_body) @body) @def.method

(field_declaration
  (modifiers) @_mods
  declarator: (variable_declarator name: (identifier) @name)
  (#match? @_mods "static")
  (#match? @_mods "final")) @def.constant

(interface_body
  (constant_declaration
    declarator: (variable_declarator name: (identifier) @name)) @def.constant)

(import_declaration
  [(scoped_identifier) (identifier)] @import.module
  (asterisk)? @import.wildcard) @import
