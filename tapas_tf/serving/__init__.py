"""Serving: what runs a model outside this process or for many users.

SavedModel export with its two signatures (`export`), the LiteRT copy written beside a model
(`lite_export`), the client of a TF Serving model server (`serving_client`), and the local web page
over the ask API: the Starlette app (`web_app`), its sessions (`web_sessions`), the batching of
concurrent questions (`batching`) and the page's static files (`web_static/`).

May import: everything below it, the ask API (`tapas_tf.qa`) included.
"""
