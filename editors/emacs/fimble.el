;;; fimble.el --- fimble code completion through eglot  -*- lexical-binding: t; -*-

;; Emacs 29+ (eglot is built in; on Emacs 28, M-x package-install RET eglot). Load this from your init:
;;   (load "/path/to/fimble/editors/emacs/fimble.el")
;; and run M-x eglot in a Python buffer. `fimble' must be on `exec-path'.
;;
;; eglot shows no inline ghost text: fimble's suggestion comes as a completion candidate
;; (annotated "fimble", sorted first) through `completion-at-point', so it appears in the
;; default *Completions* buffer, corfu or company alike.
;;
;; eglot runs one server per major mode: this replaces any other server for these modes.

;;; Code:

(require 'eglot)

(add-to-list 'eglot-server-programs
             '((python-mode python-ts-mode js-mode js-ts-mode typescript-ts-mode
                go-mode go-ts-mode rust-mode rust-ts-mode c-mode c-ts-mode c++-mode c++-ts-mode
                java-mode java-ts-mode)
               . ("fimble" "serve"
                  ;; Every key is optional (see the README).
                  ;; completionFallback "always": the suggestion as a completion item even if
                  ;; eglot ever announces inline completion, which it does not show as ghost text.
                  :initializationOptions (:multiline "auto" :maxTokens 64
                                          :completionFallback "always"))))

(provide 'fimble)
;;; fimble.el ends here
