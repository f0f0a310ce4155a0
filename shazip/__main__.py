from .programs import shazip

shazip()
