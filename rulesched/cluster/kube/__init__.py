"""The Kubernetes API as rulesched reads it: the credentials and client (access.py), the API's answers as our
errors (errors.py), and the field types of the kinds rules read, written from the client's models
(kubernetes_types.py)."""
