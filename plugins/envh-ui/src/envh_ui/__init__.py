"""``envh ui``: a local web app to play, edit and inspect environments (this plugin, envh-ui:
starlette and uvicorn). ``create_app(dirs)`` builds it; ``serve(dirs)`` runs it."""
