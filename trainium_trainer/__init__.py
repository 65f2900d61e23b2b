"""Code that runs inside the training container (or as local compute processes).

Never imports Airflow or the provider: everything arrives through the command line and environment.
"""
