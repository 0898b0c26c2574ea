from contextvars import ContextVar

_no_app_msg = """\
Working outside of application context.

Set up an application context with app.app_context().\
"""
_cv_app: ContextVar[AppContext] = ContextVar(<CURSOR>
app_ctx: AppContext = LocalProxy(  # type: ignore[assignment]
    _cv_app, unbound_message=_no_app_msg
)

_no_req_msg = """\
Working outside of request context.\
"""
