"""``envh ui``: a local web app to play, edit and inspect environments (the ``ui`` extra:
starlette and uvicorn). ``create_app(dirs)`` builds it; ``serve(dirs)`` runs it."""
