"""Every word of `bertkit app`'s page, in English and Chinese (`--lang`, and the switch at the top of each page).

What bertkit's commands print (a refusal, a summary) is shown as they print it: the page shows the CLI's own words,
not a translation of them."""

from __future__ import annotations

LANGUAGES = ("en", "zh")

TEXT: dict[str, tuple[str, str]] = {
    # navigation
    "title": ("bertkit", "bertkit"),
    "nav.train": ("Train", "训练"),
    "nav.runs": ("Runs", "运行记录"),
    "lang.other": ("中文", "English"),
    # train
    "train.heading": ("Start a run", "开始一次训练"),
    "train.recipe": ("Recipe", "训练方法"),
    "train.config": ("Ready-made config", "现成配置"),
    "train.config.none": ("none: the recipe's defaults", "不用：使用该方法的默认值"),
    "train.name": ("Run name (a folder under the runs directory)", "运行名称（运行目录下的文件夹）"),
    "train.model": ("Model: the embedded default, a Hub id, a local folder or a finished run",
                    "模型：内置默认模型、Hub 模型名、本地文件夹或已完成的运行"),
    "train.train": ("Training data (a path)", "训练数据（路径）"),
    "train.eval": ("Dev data (a path, optional)", "验证数据（路径，可选）"),
    "train.upload": ("or upload a file", "或上传文件"),
    "train.keys": ("Common settings (empty: the config's or the recipe's value)",
                   "常用设置（留空：使用配置或方法的默认值）"),
    "train.extra": ("Every other key, as YAML (bertkit validate RECIPE --keys lists them)",
                    "其他设置，YAML 格式（bertkit validate RECIPE --keys 列出全部）"),
    "key.train.num_train_epochs": ("Passes over the training data.", "遍历训练数据的轮数。"),
    "key.train.learning_rate": ("Peak learning rate of the body (the head's: head_lr).",
                                "主体的峰值学习率（分类头的：head_lr）。"),
    "key.train.per_device_train_batch_size": ("Training examples per step (per device).",
                                              "每步（每个设备）的训练样本数。"),
    "train.need_name": ("Give the run a name first: the folder under the runs directory that it writes to.",
                        "请先为运行命名：即它在运行目录下写入的文件夹。"),
    "train.check": ("Check", "检查"),
    "train.start": ("Start", "开始训练"),
    "train.command": ("The command this page runs", "本页面将运行的命令"),
    "train.copy": ("Copy", "复制"),
    "train.validate": ("Config check (bertkit validate)", "配置检查（bertkit validate）"),
    "train.preview": ("The data as bertkit reads it (bertkit inspect)", "bertkit 读取的数据（bertkit inspect）"),
    "train.refused": ("Refused", "已拒绝"),
    "train.ok": ("ready to start", "可以开始"),
    "train.pick_recipe": ("Choose", "选择"),
    # runs
    "runs.heading": ("Runs", "运行记录"),
    "runs.none": ("No runs yet: start one on the Train page.", "还没有运行：请在“训练”页面开始一次。"),
    "runs.name": ("run", "运行"),
    "runs.recipe": ("recipe", "方法"),
    "runs.status": ("status", "状态"),
    "runs.metric": ("metric", "指标"),
    "runs.size": ("size", "大小"),
    "runs.date": ("date", "日期"),
    "runs.compare": ("Compare the two ticked runs", "比较勾选的两个运行"),
    "runs.compare.two": ("Tick exactly two runs to compare.", "请恰好勾选两个运行进行比较。"),
    "status.finished": ("finished", "已完成"),
    "status.running": ("running", "运行中"),
    "status.unfinished": ("unfinished", "未完成"),
    "status.failed": ("failed", "失败"),
    "status.corrupt": ("corrupt", "已损坏"),
    "status.mixed": ("mixed", "文件混杂"),
    "status.starting": ("starting", "启动中"),
    # watch
    "watch.command": ("Command", "命令"),
    "watch.stop": ("Stop", "停止"),
    "watch.resume": ("Resume", "继续训练"),
    "watch.report": ("Report", "报告"),
    "watch.try": ("Try", "试用"),
    "watch.share": ("Share", "分享"),
    "watch.delete": ("Delete", "删除"),
    "watch.curves": ("Curves", "曲线"),
    "watch.console": ("Console", "控制台输出"),
    "watch.step": ("step", "步"),
    "watch.loss": ("loss", "损失"),
    "watch.lr": ("learning rate", "学习率"),
    "watch.dev": ("dev", "验证集"),
    "watch.nothing": ("Nothing logged yet.", "尚无记录。"),
    "watch.no_resume": ("Started from a shell: continue it there with resume=true output_dir=",
                        "从命令行启动的运行：请在命令行用 resume=true output_dir= 继续"),
    # delete
    "delete.ask": ("Delete this run and every file in it? This cannot be undone.",
                   "删除该运行及其中的所有文件？此操作无法撤销。"),
    "delete.yes": ("Delete it", "确认删除"),
    "delete.no": ("Keep it", "保留"),
    "delete.done": ("Deleted", "已删除"),
    "delete.running": ("It is running: stop it first.", "该运行正在进行：请先停止。"),
    # try
    "try.heading": ("Try the model", "试用模型"),
    "try.run": ("Predict", "预测"),
    "try.lines": ("one per line", "每行一条"),
    "try.answer": ("Answer", "结果"),
    "try.file": ("Predict a whole file (bertkit predict)", "预测整个文件（bertkit predict）"),
    "try.download": ("Download the predictions", "下载预测结果"),
    "try.unfinished": ("Only a finished run can be tried.", "只能试用已完成的运行。"),
    "field.text": ("text", "文本"),
    "field.text_pair": ("second text of the pair", "句对的第二个文本"),
    "field.question": ("question", "问题"),
    "field.context": ("context", "上下文"),
    "field.options": ("options", "选项"),
    "field.query": ("query", "查询"),
    "field.texts": ("passages", "段落"),
    # share
    "share.heading": ("Push to the Hugging Face Hub", "推送到 Hugging Face Hub"),
    "share.card": ("The model card that goes with it", "随模型上传的模型卡"),
    "share.repo": ("Repository (user/name)", "仓库（用户名/模型名）"),
    "share.token": ("Hub token (kept for this push only; default: your saved login)",
                    "Hub 令牌（仅用于本次推送；默认使用已保存的登录）"),
    "share.private": ("private", "私有"),
    "share.push": ("Push", "推送"),
    # compare
    "compare.heading": ("Comparison", "比较"),
    # errors
    "error.heading": ("Refused", "已拒绝"),
    "error.back": ("Back", "返回"),
    "refuse.name": ("run name {name}: use letters, digits, '.', '-' and '_' (one optional group/ prefix)",
                    "运行名称 {name}：只能使用字母、数字、'.'、'-' 和 '_'（可带一层 分组/ 前缀）"),
    "refuse.outside": ("{path} is outside the runs directory {root}", "{path} 不在运行目录 {root} 之内"),
    "refuse.recipe": ("recipe {recipe}: choose one of {recipes}", "训练方法 {recipe}：请从 {recipes} 中选择"),
    "refuse.yaml": ("the YAML box does not parse: {error}", "YAML 框无法解析：{error}"),
    "refuse.yaml_mapping": ("the YAML box must hold key: value lines (a mapping)",
                            "YAML 框必须是 key: value 形式的若干行（一个映射）"),
    "refuse.no_file": ("no file {name} in the runs directory", "运行目录中没有文件 {name}"),
    "refuse.no_run": ("no run {name} in the runs directory", "运行目录中没有运行 {name}"),
    "refuse.not_running": ("{name} is not running: nothing to stop", "{name} 没有在运行：无需停止"),
    "refuse.shell_run": ("{name} was started from a shell: continue it there with resume=true output_dir={path}",
                         "{name} 是从命令行启动的：请在命令行用 resume=true output_dir={path} 继续"),
    "refuse.running": ("{name} is running", "{name} 正在运行"),
    "refuse.not_a_run": ("{path} is not a bertkit run: the page deletes only runs",
                         "{path} 不是 bertkit 运行：本页面只删除运行"),
}


def translator(lang: str):
    """t(key) in `lang` (a key missing from the table is shown as itself, and the test of the table catches it)."""
    index = LANGUAGES.index(lang) if lang in LANGUAGES else 0
    return lambda key: TEXT[key][index] if key in TEXT else key


__all__ = ["LANGUAGES", "TEXT", "translator"]
