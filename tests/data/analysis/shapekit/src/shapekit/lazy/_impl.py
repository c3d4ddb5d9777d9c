class Model:
    def __init__(self, name: str) -> None:
        self.name = name

    def predict(self, value: int) -> int:
        return value + 1
