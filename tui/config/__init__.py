"""The configuration: the settings and their loader (settings.py: config.toml, the environment, one-line errors), the
built-in demo's deployment (demo.py), a deployment's models, one per manager kind (deployments.py), the parts they are
built of (parts.py), and Slurm's words they share with the Slurm manager (slurm_words.py). Each imports only those
after it in this list (`lint-imports`).
"""
